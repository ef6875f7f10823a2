// Stray: the pure ledger core uses another component (the store).
#include "vramd/store/ledger_store.h"
#include "vramd/ledger/model.h"
#include "vramd/status.h"
