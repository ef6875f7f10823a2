// Stray: hiredis outside src/store.
#include <string>
#include <hiredis/hiredis.h>
