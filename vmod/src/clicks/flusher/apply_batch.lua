local seq = tonumber(ARGV[2])
local noted = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '')
if noted and seq <= noted then
  redis.call('HSET', KEYS[1], ARGV[1], noted)
  return 0
end
if seq > math.max(noted or 0, tonumber(ARGV[3])) + 1 then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if not noted then redis.pcall('EXPIRE', KEYS[1], ARGV[4], 'NX') end

-- Adds the fields and counts `list[first..last]` (pairs, distinct) to the
-- details hash `key`; a new field past MAX_DETAIL_FIELDS counts under its
-- kind's `other` instead.
local function add_details(key, ttl, list, first, last)
  local fields
  for j = first, last, 2 do
    local field, n = list[j], tonumber(list[j+1])
    if redis.pcall('HINCRBY', key, field, n) == n then
      -- A new field (an answer equal to the count added): counted,
      -- unless it made the hash too large.
      if fields then fields = fields + 1 else fields = redis.pcall('HLEN', key) end
      if type(fields) ~= 'number' then fields = 0 end
      if fields == 1 and j == first and j < last - 1
          and (last - first + 1) / 2 <= MAX_DETAIL_FIELDS then
        -- The first field made the hash: the others are new too, set in
        -- one call, not one each.
        redis.pcall('HSET', key, unpack(list, j + 2, last))
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
end

-- Adds the digests `list[first..last]` to the register `key`.
local function add_visitors(key, ttl, list, first, last)
  if last >= first and redis.pcall('PFADD', key, unpack(list, first, last)) == 1
      and ttl ~= '0' then
    redis.pcall('EXPIRE', key, ttl, 'NX')
  end
end

-- A link's first clicks on a day (the format of core's `clicks/first.rs`):
-- its detail fields and counts, as pairs; its visitors' digests; its other
-- lines.
local function read_first(text)
  local details, visitors, rest = {}, {}, {}
  for line in string.gmatch(text, '[^\n]+') do
    local n, field = string.match(line, '^(%d+) (.+)$')
    local digests = string.match(line, '^visitors (.*)$')
    if n then
      details[#details + 1] = field
      details[#details + 1] = n
      rest[#rest + 1] = line
    elseif digests then
      for digest in string.gmatch(digests, '%S+') do visitors[#visitors + 1] = digest end
    else
      rest[#rest + 1] = line
    end
  end
  return details, visitors, rest
end

-- Moves the visitors of a link's first clicks on a day (field `field` of
-- `first_hash`) into its register of that day: done before anything else
-- writes the register, so that the two never hold one visitor both.
local function fold_first(first_hash, field, register, ttl)
  local text = redis.pcall('HGET', first_hash, field)
  if type(text) ~= 'string' then return end
  local _, digests, rest = read_first(text)
  if #digests == 0 then return end
  add_visitors(register, ttl, digests, 1, #digests)
  rest[#rest + 1] = ''
  redis.pcall('HSET', first_hash, field, #rest > 1 and table.concat(rest, '\n') or '')
end

-- Keys given their TTL in this call.
local expiring = {}
local i = 5
while i <= #ARGV do
  local op, index, ttl = ARGV[i], tonumber(ARGV[i+1]), ARGV[i+2]
  local key = KEYS[index]
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
    add_details(key, ttl, ARGV, first, last)
  elseif op == 'z' then
    for j = first, last, 2 do
      local n = tonumber(ARGV[j+1])
      if tonumber(redis.pcall('ZINCRBY', key, n, ARGV[j])) == n then made = true end
    end
  elseif op == 'p' then
    made = redis.pcall('PFADD', key, unpack(ARGV, first, last)) == 1
  elseif op == 'f' then
    local field, text = ARGV[first], ARGV[first + 1]
    if redis.pcall('HSETNX', key, field, text) == 1 then
      made = true
    else
      -- The link has first clicks on this day already (another Varnish's,
      -- or this one's before it started again): these count where a later
      -- flush's would.
      local details, digests = read_first(text)
      if #details > 0 then add_details(KEYS[index + 1], ttl, details, 1, #details) end
      fold_first(key, field, KEYS[index + 2], ttl)
      add_visitors(KEYS[index + 2], ttl, digests, 1, #digests)
    end
  elseif op == 'r' then
    fold_first(key, ARGV[first], KEYS[index + 1], ttl)
  else
    return redis.error_reply('unknown operation ' .. tostring(op))
  end
  if made and ttl ~= '0' and not expiring[key] then
    redis.pcall('EXPIRE', key, ttl, 'NX')
    expiring[key] = true
  end
  i = last + 1
end
return 1
