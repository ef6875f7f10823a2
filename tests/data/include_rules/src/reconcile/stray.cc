// Stray: httplib outside http, kube and vramctl.
#include <httplib.h>
