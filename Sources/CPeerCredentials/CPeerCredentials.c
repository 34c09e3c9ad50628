/* Declarations only; see include/CPeerCredentials.h. */
