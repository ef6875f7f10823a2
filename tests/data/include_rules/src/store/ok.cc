// Allowed: the Valkey adapter.
#include <hiredis/hiredis.h>
#include <nlohmann/json.hpp>
