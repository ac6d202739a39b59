-- A token bucket in a hash: the tokens left and when they were counted.
-- KEYS[1] the bucket. ARGV: capacity, rate (tokens a second), cost, and the
-- time (s) or nothing for the server's TIME.
local key = KEYS[1]
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local state = redis.call('HMGET', key, 'tokens', 'ts')
local tokens = tonumber(state[1]) or capacity
local ts = tonumber(state[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - ts) * rate)
local allowed = tokens >= cost
if allowed then
  tokens = tokens - cost
end
redis.call('HSET', key, 'tokens', tokens, 'ts', now)
redis.call('PEXPIRE', key, math.ceil((capacity - tokens) / rate * 1000) + 1000)
return {allowed and 1 or 0, math.floor(tokens), tostring(tokens)}
