/* hex: the value of a hexadecimal digit, for the places that read hex text (percent-escapes,
 * UUIDs, the encryption key). */
#ifndef QUEEN_HEX_H
#define QUEEN_HEX_H

/* 0-15 for a digit of either case, -1 for any other character (the NUL included). */
static inline int
hex_digit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

#endif
