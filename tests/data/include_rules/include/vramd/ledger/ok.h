// Allowed: vramd headers only.
#pragma once
#include "vramd/status.h"
