-- BudgetGiveBack (issue 32): a claim (budget_take.lua) whose action did
-- nothing (refused by a PodDisruptionBudget, an API error, the fence) is
-- given back: it leaves the minute, and the key's cooldown ends if the claim
-- still holds it (a later claim of another replica is left alone).
-- KEYS: 1 P:budget:recent, 2 P:budget:k:<key>. ARGV: 1 the claim id.
redis.call('ZREM', KEYS[1], ARGV[1])
if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end
return 1
