-- wrk script: POSTs one body file to one path, over and over.
--   wrk -s bench/wrk/post.lua URL -- /scheduler/filter BODY_FILE [LABEL]
-- Prints a last line "RESULT {json}" with requests/s and latency percentiles
-- (microseconds) for scripts/bench-http.sh to collect.
local path, label, req

function init(args)
  path = args[1] or "/"
  local file = args[2]
  label = args[3] or path
  local body = ""
  if file then
    local f = assert(io.open(file, "rb"))
    body = f:read("*a")
    f:close()
  end
  req = wrk.format("POST", path, {["Content-Type"] = "application/json"}, body)
end

function request()
  return req
end

function done(summary, latency, requests)
  local e = summary.errors
  local secs = summary.duration / 1e6
  io.write(string.format(
    'RESULT {"label":"%s","requests":%d,"seconds":%.3f,"rps":%.1f,"p50_us":%d,"p90_us":%d,"p99_us":%d,' ..
    '"max_us":%d,"mean_us":%.1f,"errors":%d,"non2xx":%d}\n',
    label, summary.requests, secs, summary.requests / secs, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max, latency.mean, e.connect + e.read + e.write + e.timeout, e.status))
end
