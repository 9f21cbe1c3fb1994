"""The Lua scripts that count a key's limits in Redis (one EVALSHA per request start, end, renewal).

Every window (UTC minute, hour, day, month) is taken from Redis's own clock (`TIME` inside the
script), so any number of processes on any number of machines count into the same windows whatever
their clocks say. A script builds its windowed key names from the key's base name (`ARGV`), the
`<prefix>:keys:<key id>:<counter>:<window>` layout of :func:`keys.limits.counter_key`.

Token limits are *reserved* at admission: the request's most (its prompt estimate and `max_tokens`)
is added to the token counters when it is admitted, and taken back when it settles, where the
tokens it really used are charged. Concurrent requests therefore see each other's reservations and
cannot together pass a token limit that the reservations respect.

A concurrency slot is a lease: its score in the sorted set is the time it expires; the gateway
renews it while the request is alive, so only a slot of a process that died frees itself.
"""

# The UTC calendar from Redis's clock, without os.date (absent in Redis's Lua): Howard Hinnant's
# days-to-civil algorithm (http://howardhinnant.github.io/date_algorithms.html#civil_from_days).
WINDOWS_LUA = r"""
local t = redis.call('TIME')
local secs = tonumber(t[1])
local now = secs + tonumber(t[2]) / 1000000
local z = math.floor(secs / 86400) + 719468
local era = math.floor(z / 146097)
local doe = z - era * 146097
local yoe = doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)
yoe = math.floor(yoe / 365)
local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
local mp = math.floor((5 * doy + 2) / 153)
local mday = doy - math.floor((153 * mp + 2) / 5) + 1
local mon = mp < 10 and mp + 3 or mp - 9
local year = yoe + era * 400 + (mon <= 2 and 1 or 0)
local sod = secs % 86400
local month = string.format('%04d%02d', year, mon)
local day = month .. string.format('%02d', mday)
local hour = day .. string.format('%02d', math.floor(sod / 3600))
local minute = hour .. string.format('%02d', math.floor((sod % 3600) / 60))
local stamp = string.format('%.6f', now)
"""

# KEYS: generation, concurrency slots, alerts fired, dirty set, last use
# ARGV: 1 generation, 2 slot, 3 lease seconds, 4 rpm, 5 tpm, 6 max concurrent, 7 requests/day,
#       8 requests/month, 9 tokens/day, 10 tokens/month, 11 alert thresholds, 12 source ip,
#       13 key id, 14 key base name, 15 tokens to reserve
ACQUIRE_LUA = (
    r"""
local gen = redis.call('GET', KEYS[1]) or 'none'
if gen ~= ARGV[1] then return {'stale', gen} end
"""
    + WINDOWS_LUA
    + r"""
local base = ARGV[14]
local function k(name, window) return base .. ':' .. name .. ':' .. window end
local usage = base .. ':u:' .. hour
local reserve = tonumber(ARGV[15])
local need = math.max(1, reserve)
local function num(key) return tonumber(redis.call('GET', key) or '0') end
local function deny()
  redis.call('HINCRBY', usage, 'denied', 1)
  redis.call('EXPIRE', usage, 691200)
  redis.call('SADD', KEYS[4], ARGV[13])
end
local checks = {
  {'requests_per_minute', k('rpm', minute), ARGV[4], 1},
  {'tokens_per_minute', k('tpm', minute), ARGV[5], need},
  {'requests_per_day', k('rd', day), ARGV[7], 1},
  {'requests_per_month', k('rm', month), ARGV[8], 1},
  {'tokens_per_day', k('td', day), ARGV[9], need},
  {'tokens_per_month', k('tm', month), ARGV[10], need},
}
for _, c in ipairs(checks) do
  local limit = tonumber(c[3])
  if limit >= 0 then
    local used = num(c[2])
    if used + c[4] > limit then
      deny()
      return {'limit', c[1], tostring(used), tostring(limit), stamp, tostring(c[4])}
    end
  end
end
local conc = tonumber(ARGV[6])
local lease = tonumber(ARGV[3])
if conc >= 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  local held = redis.call('ZCARD', KEYS[2])
  if held >= conc then
    deny()
    return {'limit', 'max_concurrent', tostring(held), tostring(conc), stamp, '1'}
  end
  redis.call('ZADD', KEYS[2], now + lease, ARGV[2])
  redis.call('EXPIRE', KEYS[2], math.ceil(lease) + 60)
end
local crossed = {}
local function count(key, ttl, limit, label)
  local after = redis.call('INCR', key)
  if after == 1 then redis.call('EXPIRE', key, ttl) end
  limit = tonumber(limit)
  if limit > 0 then
    for pct in string.gmatch(ARGV[11], '%d+') do
      local p = tonumber(pct)
      if after * 100 >= p * limit and (after - 1) * 100 < p * limit then
        if redis.call('SADD', KEYS[3], label .. ':' .. pct) == 1 then
          table.insert(crossed, label .. ':' .. pct)
        end
      end
    end
  end
end
count(k('rpm', minute), 120, '-1', 'rpm')
count(k('rd', day), 172800, ARGV[7], 'requests_per_day:' .. day)
count(k('rm', month), 3456000, ARGV[8], 'requests_per_month:' .. month)
if reserve > 0 then
  for _, w in ipairs({{k('tpm', minute), 120}, {k('td', day), 172800}, {k('tm', month), 3456000}}) do
    redis.call('INCRBY', w[1], reserve)
    if redis.call('TTL', w[1]) < 0 then redis.call('EXPIRE', w[1], w[2]) end
  end
end
redis.call('EXPIRE', KEYS[3], 3456000)
redis.call('HINCRBY', usage, 'requests', 1)
redis.call('EXPIRE', usage, 691200)
redis.call('HSET', KEYS[5], 't', stamp, 'ip', ARGV[12])
redis.call('SADD', KEYS[4], ARGV[13])
return {'ok', stamp, minute, day, month, unpack(crossed)}
"""
)

# KEYS: concurrency slots, alerts fired, dirty set
# ARGV: 1 slot, 2 tokens used, 3 tokens/day, 4 tokens/month, 5 alert thresholds, 6 key id,
#       7 key base name, 8 tokens reserved, 9-11 the minute, day and month they were reserved in
SETTLE_LUA = (
    r"""
if ARGV[1] ~= '' then redis.call('ZREM', KEYS[1], ARGV[1]) end
local base = ARGV[7]
local function k(name, window) return base .. ':' .. name .. ':' .. window end
local reserved = tonumber(ARGV[8])
if reserved > 0 then
  for _, key in ipairs({k('tpm', ARGV[9]), k('td', ARGV[10]), k('tm', ARGV[11])}) do
    if redis.call('EXISTS', key) == 1 then redis.call('DECRBY', key, reserved) end
  end
end
local tokens = tonumber(ARGV[2])
local crossed = {'ok'}
if tokens <= 0 then return crossed end
"""
    + WINDOWS_LUA
    + r"""
local function add(key, ttl, limit, label)
  local after = redis.call('INCRBY', key, tokens)
  if redis.call('TTL', key) < 0 then redis.call('EXPIRE', key, ttl) end
  limit = tonumber(limit)
  if limit > 0 then
    for pct in string.gmatch(ARGV[5], '%d+') do
      local p = tonumber(pct)
      if after * 100 >= p * limit and (after - tokens) * 100 < p * limit then
        if redis.call('SADD', KEYS[2], label .. ':' .. pct) == 1 then
          table.insert(crossed, label .. ':' .. pct)
        end
      end
    end
  end
end
add(k('tpm', minute), 120, '-1', 'tpm')
add(k('td', day), 172800, ARGV[3], 'tokens_per_day:' .. day)
add(k('tm', month), 3456000, ARGV[4], 'tokens_per_month:' .. month)
redis.call('EXPIRE', KEYS[2], 3456000)
local usage = base .. ':u:' .. hour
redis.call('HINCRBY', usage, 'tokens', tokens)
redis.call('EXPIRE', usage, 691200)
redis.call('SADD', KEYS[3], ARGV[6])
return crossed
"""
)

# KEYS: concurrency slots; ARGV: slot, lease seconds. Extends a live request's lease (1), or 0 if gone.
RENEW_LUA = r"""
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])) + 60)
return 1
"""
