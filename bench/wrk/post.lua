-- wrk script: POSTs one body file to one path, over and over.
--   wrk -s bench/wrk/post.lua URL -- /scheduler/filter BODY_FILE
-- The last line printed is "RESULT {json}": requests/s and latency
-- percentiles (microseconds), collected by scripts/bench-http.sh.
local req

function init(args)
  -- args[0] is the URL; then the arguments after "--".
  local path = args[1] or "/"
  local body = ""
  if args[2] then
    local f = assert(io.open(args[2], "rb"))
    body = f:read("*a")
    f:close()
  end
  req = wrk.format("POST", path, {["Content-Type"] = "application/json"}, body)
end

function request()
  return req
end

-- Runs in the main Lua state (not the threads'), after the run.
function done(summary, latency, requests)
  local e = summary.errors
  local secs = summary.duration / 1e6
  io.write(string.format(
    'RESULT {"requests":%d,"seconds":%.3f,"rps":%.1f,"p50_us":%d,"p90_us":%d,"p99_us":%d,' ..
    '"max_us":%d,"mean_us":%.1f,"errors":%d,"non2xx":%d}\n',
    summary.requests, secs, summary.requests / secs, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max, latency.mean, e.connect + e.read + e.write + e.timeout, e.status))
end
