-- Fixed window counter, windows aligned to the Unix epoch.
--
-- The counter of the window holding `now` lives in KEYS[1]..':'..index, where
-- index = floor(now / window). It is created by INCRBY and given a PEXPIRE of
-- one window on its first hit, so old windows disappear by themselves.
-- On Redis Cluster give KEYS[1] a {hashtag}: the derived key then hashes to
-- the same slot.
--
-- KEYS[1]  limiter key
-- ARGV[1]  limit   requests allowed per window (positive integer)
-- ARGV[2]  window  window length, microseconds
-- ARGV[3]  now     the caller's clock, microseconds since the Unix epoch
-- ARGV[4]  cost    units to charge (non-negative integer)
--
-- Returns {allowed, remaining, retry_after_us, reset_after_us}:
--   allowed         1, or 0 when denied (a denied request is not counted)
--   remaining       requests of cost 1 still allowed in this window
--   retry_after_us  0 if allowed; else the time to the next window;
--                   -1 if cost > limit (it can never pass)
--   reset_after_us  the time to the next window; 0 if this one is unused
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])

local index = math.floor(now / window)
local key = KEYS[1] .. ':' .. string.format('%d', index)
local window_end = (index + 1) * window
local count = tonumber(redis.call('GET', key) or '0')

local allowed, retry = 0, window_end - now
if count + cost <= limit then
  allowed, retry = 1, 0
  if cost > 0 then
    count = redis.call('INCRBY', key, cost)
    if count == cost then
      redis.call('PEXPIRE', key, math.ceil(window / 1000))
    end
  end
elseif cost > limit then
  retry = -1
end

local reset = 0
if count > 0 then
  reset = window_end - now
end
return {allowed, math.max(limit - count, 0), retry, reset}
