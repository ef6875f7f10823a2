// Stray: nlohmann in a public header.
#pragma once
#include <nlohmann/json.hpp>
