// Allowed: the HTTP server.
#include <httplib.h>
