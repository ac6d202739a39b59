-- Token bucket: a hash {tokens, ts}. The bucket holds up to `capacity` tokens
-- and refills continuously at limit / window tokens per microsecond; a fresh
-- bucket is full. A request passes iff the bucket holds at least `cost`
-- tokens, and then takes them. Token counts are Lua numbers (doubles), as in
-- most deployed token buckets. Every admission renews a PEXPIRE of the time
-- the bucket takes to fill up again.
--
-- KEYS[1]  the hash
-- ARGV[1]  limit   tokens added per window (positive integer)
-- ARGV[2]  window  window length, microseconds
-- ARGV[3]  now     the caller's clock, microseconds since the Unix epoch
-- ARGV[4]  cost    tokens to take (non-negative integer)
-- ARGV[5]  burst   bucket capacity; 0 or absent means limit
--
-- Returns {allowed, remaining, retry_after_us, reset_after_us}:
--   allowed         1, or 0 when denied (a denied request takes nothing)
--   remaining       whole tokens left
--   retry_after_us  0 if allowed; else the time until `cost` tokens are
--                   there, rounded up; -1 if cost > capacity
--   reset_after_us  the time until the bucket is full, rounded up
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local capacity = tonumber(ARGV[5] or '0')
if capacity == 0 then
  capacity = limit
end

local tokens = capacity
local state = redis.call('HMGET', key, 'tokens', 'ts')
if state[1] then
  tokens = tonumber(state[1])
  local elapsed = now - tonumber(state[2])
  if elapsed > 0 then
    tokens = tokens + elapsed * limit / window
  end
  tokens = math.min(tokens, capacity)
end

local allowed, retry = 0, 0
if cost > capacity then
  retry = -1
elseif tokens >= cost then
  allowed = 1
  if cost > 0 then
    tokens = tokens - cost
    redis.call('HSET', key, 'tokens', tokens, 'ts', now)
    redis.call('PEXPIRE', key, math.max(1, math.ceil((capacity - tokens) * window / limit / 1000)))
  end
else
  retry = math.ceil((cost - tokens) * window / limit)
end
return {allowed, math.max(math.floor(tokens), 0), retry, math.ceil((capacity - tokens) * window / limit)}
