-- A fixed window: INCR a counter and give it the window's TTL when it is
-- new; answer a table.
-- KEYS[1] the counter. ARGV: window (ms), limit.
local current = redis.call('INCR', KEYS[1])
if current == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
local limit = tonumber(ARGV[2])
local ttl = redis.call('PTTL', KEYS[1])
-- allowed as a boolean (false is a nil in RESP2), the TTL in ms and in
-- seconds (a fraction, which Redis truncates), the count.
return {current <= limit, math.max(limit - current, 0), ttl, ttl / 1000, current}
