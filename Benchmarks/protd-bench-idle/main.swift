// The memory floor for the idle-RSS figure: a Swift program that loads
// Foundation, as protd does, and then does nothing. protd-bench reads its
// resident size next to the daemon's.
import Foundation

_ = Date().timeIntervalSince1970
print("ready")
fflush(nil)
while true { pause() }
