-- Leaky bucket (as a meter): a hash {level, ts}. The bucket starts empty and
-- drains continuously at limit / window units per microsecond; a request
-- pours `cost` units in and passes iff the level stays at most `capacity`.
-- Levels are Lua numbers (doubles), as in most deployed leaky buckets. Every
-- admission renews a PEXPIRE of the time the bucket takes to drain.
--
-- KEYS[1]  the hash
-- ARGV[1]  limit   units drained per window (positive integer)
-- ARGV[2]  window  window length, microseconds
-- ARGV[3]  now     the caller's clock, microseconds since the Unix epoch
-- ARGV[4]  cost    units to pour in (non-negative integer)
-- ARGV[5]  burst   bucket capacity; 0 or absent means limit
--
-- Returns {allowed, remaining, retry_after_us, reset_after_us}:
--   allowed         1, or 0 when denied (a denied request pours nothing)
--   remaining       whole units of room left
--   retry_after_us  0 if allowed; else the time until `cost` fits, rounded
--                   up; -1 if cost > capacity
--   reset_after_us  the time until the bucket is empty, rounded up
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local capacity = tonumber(ARGV[5] or '0')
if capacity == 0 then
  capacity = limit
end

local level = 0
local state = redis.call('HMGET', key, 'level', 'ts')
if state[1] then
  level = tonumber(state[1])
  local elapsed = now - tonumber(state[2])
  if elapsed > 0 then
    level = level - elapsed * limit / window
  end
  level = math.max(level, 0)
end

local allowed, retry = 0, 0
if cost > capacity then
  retry = -1
elseif level + cost <= capacity then
  allowed = 1
  if cost > 0 then
    level = level + cost
    redis.call('HSET', key, 'level', level, 'ts', now)
    redis.call('PEXPIRE', key, math.max(1, math.ceil(level * window / limit / 1000)))
  end
else
  retry = math.ceil((level + cost - capacity) * window / limit)
end
return {allowed, math.max(math.floor(capacity - level), 0), retry, math.ceil(level * window / limit)}
