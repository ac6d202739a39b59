-- Sliding window counter: the current and the previous epoch-aligned window,
-- the previous one weighted by how much of it still overlaps the sliding
-- window. At elapsed time e into the current window the count is
--
--   current + floor(previous * (window - e) / window)
--
-- and a request passes iff count + cost <= limit.
--
-- Window counters live in KEYS[1]..':'..index (index = floor(now / window));
-- each is created by INCRBY and given a PEXPIRE of two windows on its first
-- hit, since it is read as the previous window during the next one.
-- On Redis Cluster give KEYS[1] a {hashtag}.
--
-- KEYS[1]  limiter key
-- ARGV[1]  limit   requests allowed per window (positive integer)
-- ARGV[2]  window  window length, microseconds
-- ARGV[3]  now     the caller's clock, microseconds since the Unix epoch
-- ARGV[4]  cost    units to charge (non-negative integer)
--
-- Returns {allowed, remaining, retry_after_us, reset_after_us}:
--   allowed         1, or 0 when denied (a denied request is not counted)
--   remaining       requests of cost 1 still allowed now
--   retry_after_us  0 if allowed; else the time until the weighted count has
--                   dropped enough for this request; -1 if cost > limit
--   reset_after_us  the time until the weighted count is 0
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])

local index = math.floor(now / window)
local elapsed = now - index * window
local cur_key = KEYS[1] .. ':' .. string.format('%d', index)
local prev_key = KEYS[1] .. ':' .. string.format('%d', index - 1)
local cur = tonumber(redis.call('GET', cur_key) or '0')
local prev = tonumber(redis.call('GET', prev_key) or '0')

-- The first elapsed time e >= from at which floor(n * (window - e) / window)
-- is at most k, that is n * (window - e) <= (k + 1) * window - 1.
local function first_elapsed(n, k, from)
  if n == 0 then
    return from
  end
  return math.max(window - math.floor(((k + 1) * window - 1) / n), from)
end

-- The elapsed time, counted from the start of the current window (it may lie
-- in the next one), at which the weighted count first drops to at most k.
local function elapsed_until(k)
  if cur <= k then
    return math.min(first_elapsed(prev, k - cur, elapsed), window)
  end
  -- Only in the next window, where the current count becomes the previous.
  return window + first_elapsed(cur, k, 0)
end

local count = cur + math.floor(prev * (window - elapsed) / window)
local allowed, retry = 0, 0
if count + cost <= limit then
  allowed = 1
  if cost > 0 then
    cur = redis.call('INCRBY', cur_key, cost)
    if cur == cost then
      redis.call('PEXPIRE', cur_key, math.ceil(2 * window / 1000))
    end
    count = count + cost
  end
elseif cost > limit then
  retry = -1
else
  retry = elapsed_until(limit - cost) - elapsed
end
return {allowed, math.max(limit - count, 0), retry, elapsed_until(0) - elapsed}
