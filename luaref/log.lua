-- Sliding window log: a sorted set of the admitted requests, scored by their
-- time. A request passes iff the cost admitted in (now - window, now] plus its
-- own cost is at most the limit. A request of cost n adds n members; members
-- are unique ("<now>-<seq>", seq counting the members already at that time),
-- so requests at the same microsecond are all kept. Denied requests are not
-- logged. Every admission renews a PEXPIRE of one window.
--
-- KEYS[1]  the sorted set
-- ARGV[1]  limit   requests allowed per window (positive integer)
-- ARGV[2]  window  window length, microseconds
-- ARGV[3]  now     the caller's clock, microseconds since the Unix epoch
-- ARGV[4]  cost    units to charge (non-negative integer)
--
-- Returns {allowed, remaining, retry_after_us, reset_after_us}:
--   allowed         1, or 0 when denied
--   remaining       requests of cost 1 still allowed now
--   retry_after_us  0 if allowed; else the time until enough of the oldest
--                   entries have left the window; -1 if cost > limit
--   reset_after_us  the time until the newest entry leaves the window
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])

redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local count = redis.call('ZCARD', key)

local allowed, retry = 0, 0
if count + cost <= limit then
  allowed = 1
  if cost > 0 then
    local stamp = string.format('%d', now)
    local seq = redis.call('ZCOUNT', key, now, now)
    local args = {}
    for i = 1, cost do
      args[#args + 1] = now
      args[#args + 1] = stamp .. '-' .. string.format('%d', seq + i)
      if #args == 2000 or i == cost then -- stay well inside Lua's stack
        redis.call('ZADD', key, unpack(args))
        args = {}
      end
    end
    redis.call('PEXPIRE', key, math.ceil(window / 1000))
    count = count + cost
  end
elseif cost > limit then
  retry = -1
else
  -- The request fits once the oldest count + cost - limit units have left.
  local i = count + cost - limit - 1
  local oldest = redis.call('ZRANGE', key, i, i, 'WITHSCORES')
  retry = tonumber(oldest[2]) + window - now
end

local reset = 0
if count > 0 then
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  reset = tonumber(newest[2]) + window - now
end
return {allowed, math.max(limit - count, 0), retry, reset}
