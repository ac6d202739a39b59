-- GCRA (generic cell rate algorithm), in the style of go-redis/redis_rate:
-- one string key holds the theoretical arrival time (TAT). With emission
-- interval T = window / limit and tolerance tau = T * burst, a request of
-- cost c passes iff max(TAT, now) + c*T - tau <= now, and then moves the TAT
-- to max(TAT, now) + c*T. Times are doubles in microseconds counted from
-- 2024-01-01T00:00:00Z (1704067200000000 us after the Unix epoch) rather than
-- from 1970, which keeps them precise to a few nanoseconds. The key expires
-- when the TAT has passed.
--
-- KEYS[1]  the TAT key
-- ARGV[1]  limit   requests per window (positive integer)
-- ARGV[2]  window  window length, microseconds
-- ARGV[3]  now     the caller's clock, microseconds since the Unix epoch
-- ARGV[4]  cost    cells to charge (non-negative integer)
-- ARGV[5]  burst   capacity; 0 or absent means limit
--
-- Returns {allowed, remaining, retry_after_us, reset_after_us}:
--   allowed         1, or 0 when denied (a denied request changes nothing)
--   remaining       requests of cost 1 still allowed now
--   retry_after_us  0 if allowed; else the time until this request would
--                   pass, rounded up; -1 if cost > burst
--   reset_after_us  the time until the TAT, rounded up
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local now = tonumber(ARGV[3]) - 1704067200000000
local cost = tonumber(ARGV[4])
local burst = tonumber(ARGV[5] or '0')
if burst == 0 then
  burst = limit
end

local interval = window / limit
local tolerance = interval * burst
local tat = tonumber(redis.call('GET', key) or now)
tat = math.max(tat, now)

local new_tat = tat + interval * cost
local diff = now - (new_tat - tolerance)
local allowed, retry, ttl = 0, 0, tat - now
if cost > burst then
  retry = -1
elseif diff < 0 then
  retry = math.ceil(-diff)
else
  allowed, ttl = 1, new_tat - now
  if cost > 0 then
    redis.call('SET', key, new_tat, 'PX', math.max(1, math.ceil(ttl / 1000)))
  end
end
return {allowed, math.max(math.floor((tolerance - ttl) / interval), 0), retry, math.ceil(ttl)}
