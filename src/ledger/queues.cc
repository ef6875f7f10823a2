// queues: see include/vramd/ledger/queues.h (being written).
#include "vramd/ledger/queues.h"
