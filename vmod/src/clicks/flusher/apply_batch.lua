
local seq = tonumber(ARGV[2])
local noted = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '')
if noted and seq <= noted then
  redis.call('HSET', KEYS[1], ARGV[1], noted)
  return 0
end
if seq > math.max(noted or 0, tonumber(ARGV[3])) + 1 then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if not noted then redis.pcall('EXPIRE', KEYS[1], ARGV[4], 'NX') end
local i = 5
while i <= #ARGV do
  local op, key, ttl = ARGV[i], KEYS[tonumber(ARGV[i+1])], ARGV[i+2]
  local first, last = i + 4, i + 3 + tonumber(ARGV[i+3])
  -- Whether a field, member or register was made (an answer equal to the
  -- count added is a new field's).
  local made = false
  if op == 'h' then
    for j = first, last, 2 do
      local n = tonumber(ARGV[j+1])
      if redis.pcall('HINCRBY', key, ARGV[j], n) == n then made = true end
    end
  elseif op == 'd' then
    local fields
    for j = first, last, 2 do
      local field, n = ARGV[j], tonumber(ARGV[j+1])
      if redis.pcall('HINCRBY', key, field, n) == n then
        -- A new field: counted, unless it made the hash too large.
        if fields then fields = fields + 1 else fields = redis.pcall('HLEN', key) end
        if type(fields) ~= 'number' then fields = 0 end
        if fields == 1 and j == first and j < last - 1
            and (last - first + 1) / 2 <= MAX_DETAIL_FIELDS then
          -- The first field made the hash: the others (distinct, as the
          -- flusher sends them) are new too, set in one call, not one each.
          redis.pcall('HSET', key, unpack(ARGV, j + 2, last))
          break
        end
        if fields > MAX_DETAIL_FIELDS then
          redis.pcall('HDEL', key, field)
          local other = string.match(field, '^[^:]*') .. ':other'
          if redis.pcall('HINCRBY', key, other, n) ~= n then fields = fields - 1 end
        end
      end
    end
    if ttl ~= '0' then redis.pcall('EXPIRE', key, ttl) end
  elseif op == 'l' then
    -- A visit list: its bound, the oldest time kept, then records oldest
    -- first, each starting with its time; the newest end up at the head.
    -- A list this push made (a link's first visits, the common case) needs
    -- no cut and holds nothing old: a push and its TTL.
    local bound, oldest = tonumber(ARGV[first]), tonumber(ARGV[first+1])
    local pushed = last - first - 1
    local length = 0
    if pushed > 0 then length = redis.pcall('LPUSH', key, unpack(ARGV, first + 2, last)) end
    if type(length) ~= 'number' then length = 0 end
    if length > bound then redis.pcall('LTRIM', key, 0, bound - 1) end
    if length > pushed then
      for _ = 1, bound do
        local tail = redis.pcall('LINDEX', key, -1)
        if type(tail) ~= 'string' or (tonumber(string.match(tail, '^%d+')) or 0) >= oldest then
          break
        end
        redis.pcall('RPOP', key)
      end
    end
    if length > 0 then redis.pcall('EXPIRE', key, ttl) end
  elseif op == 'p' then
    made = redis.pcall('PFADD', key, unpack(ARGV, first, last)) == 1
  else
    return redis.error_reply('unknown operation ' .. tostring(op))
  end
  if made and ttl ~= '0' then redis.pcall('EXPIRE', key, ttl, 'NX') end
  i = last + 1
end
return 1
