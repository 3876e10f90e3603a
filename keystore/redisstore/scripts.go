package redisstore

import "github.com/redis/go-redis/v9"

// Every write script gets the same KEYS: the record, then the five state
// indexes of the record's shard in the order of indexStates. Keys derived
// inside a script (the record keys named by index members) share the
// shard's hash tag, so they live in the same Cluster slot.
//
// Numbers are kept as decimal strings: Lua numbers are doubles and tostring
// would print microsecond timestamps in exponent form, so fmt() formats them.
//
// Replies: {status, record} with the stored record value (see
// recordLayout), or {status} when there is no record; "created" and
// "updated" carry {status, field, value, ...} with only the fields the
// script chose, to be merged with the ones the caller sent.
//
// Scripts call TIME before writing, which needs effects replication: the
// default from Redis 5 and the only mode from Redis 7. Records are written
// with SET … KEEPTTL (Redis ≥ 6) so that a terminal record keeps its
// retention TTL.
var scriptPrelude = `
local IX = {pending = 2, unknown = 3, succeeded = 4, failed = 5, not_executed = 6}
local function fmt(n) return string.format('%.0f', n) end
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function terminal(s) return s == 'succeeded' or s == 'failed' end
` + recordPrelude

// recordPrelude reads and writes records. load(k) returns the record's
// fields (a table indexed by F) and its stored value, or nil; it raises a
// LAYOUT error naming what it found on a key that is not a record of this
// layout, so that no script reads or overwrites one.
var recordPrelude = luaRecordFields() + `
local function load(k)
  local v = redis.pcall('GET', k)
  if type(v) == 'table' and v.err then
    error({err = 'LAYOUT ' .. k .. ' holds a ' .. redis.call('TYPE', k).ok .. ', not a record of layout ' .. RL .. ' (one string value): it was written by another version of the store; use a new prefix'})
  end
  if not v then return nil end
  local ok, r = pcall(cmsgpack.unpack, v)
  if not ok or type(r) ~= 'table' or r[1] ~= RL or #r ~= NF then
    error({err = 'LAYOUT ' .. k .. ' holds a string that is not a record of layout ' .. RL .. '; use a new prefix'})
  end
  return r, v
end
local function save(k, r, keepttl)
  local v = cmsgpack.pack(r)
  if keepttl then
    redis.call('SET', k, v, 'KEEPTTL')
  else
    redis.call('SET', k, v)
  end
  return v
end
`

// amnesiaPrelude is the loss check of Create and of the sweep. A shard's
// marker (hash <tag>mark) holds:
//
//	ep    epoch: names one life of the shard's data
//	st    ok | lost
//	why   lat   reason and time (µs) of the detected loss
//	aat   note  time (µs) and note of the last accepted loss
//	sh    the shard count of the prefix
//	rb    DeleteExpired's latest cut-off (µs): records created before it
//	      may have been removed on purpose
//	ia    when the marker was written (µs)
//	rl    the record layout of the shard's records (recordLayout)
//
// check(mark, last, epoch, lastca, verified, newep, retention ms, shards,
// now) returns a reason when the shard lost what it acknowledged (marking
// it lost, re-creating a vanished marker in the lost state under newep),
// or nil, and the marker's epoch. epoch is the one the caller found ("":
// not known yet); verified (µs) when it last confirmed it; lastca the
// creation time of the last record the caller created in the shard and was
// told was durable, whose key is last ("": none).
const amnesiaPrelude = `
local function lose(mark, why, newep, shards, now)
  if redis.call('HEXISTS', mark, 'ep') == 0 then
    redis.call('HSET', mark, 'ep', newep, 'sh', shards, 'ia', fmt(now), 'rl', RL)
  end
  redis.call('HSET', mark, 'st', 'lost', 'why', why, 'lat', fmt(now))
  return why
end
local function check(mark, last, epoch, lastca, verified, newep, retention_ms, shards, now)
  local m = redis.call('HMGET', mark, 'ep', 'st', 'why', 'aat', 'rb')
  if not m[1] then
    return lose(mark, 'its marker is gone, so it lost every record it held (a Redis restarted without persistence, a failover to an empty replica, FLUSHALL)', newep, shards, now), newep
  end
  if m[2] == 'lost' then return (m[3] or 'it was marked lost'), m[1] end
  if epoch ~= '' and m[1] ~= epoch then
    if tonumber(m[4] or '0') > tonumber(verified) then
      -- An operator accepted a loss since the caller last looked: adopt.
      return nil, m[1]
    end
    return lose(mark, 'its marker names epoch ' .. m[1] .. ' where this process found ' .. epoch .. ', so it was emptied and initialised again', newep, shards, now), m[1]
  end
  local lr = lastca ~= '' and load(last)
  if lastca ~= '' and (lr and lr[F.ca]) ~= lastca then
    local ca = tonumber(lastca)
    -- Gone on purpose only if DeleteExpired's cut-off or the retention
    -- TTL could have reached it.
    if ca >= tonumber(m[5] or '0') and ca + tonumber(retention_ms) * 1000 > now then
      return lose(mark, 'a record created by this process at ' .. lastca .. ' (µs, Redis clock) and acknowledged as durable is gone, so it lost acknowledged writes (a failover to a replica that had not received them, an append-only file that lost its last second)', newep, shards, now), m[1]
    end
  end
  return nil, m[1]
end
`

// createScript: KEYS = the record, the five indexes, the shard's marker,
// the last record this process created in the shard (the record again if
// none). ARGV = nonce, op, key, kind, fp, state, attempts, first sent, last
// sent, result ref, result, error, meta, owner, ttl µs, retention ms, then
// the loss check's epoch, lastca, verified, newep and shards (see
// amnesiaPrelude). A Create that finds no record checks the shard for a
// loss before inserting: {'amnesia', 'why', …, 'lat', …} when it lost what
// it acknowledged, nothing written.
var createScript = redis.NewScript(scriptPrelude + amnesiaPrelude + `
local cur, raw = load(KEYS[1])
if cur then
  if cur[F.cw] == ARGV[1] then
    -- Our own Create, resent by the client after a lost reply. The SET is
    -- a write so that a following WAIT covers the original one.
    return {'ok', save(KEYS[1], cur, true)}
  end
  return {'exists', raw}
end
local now = now_us()
local why, ep = check(KEYS[7], KEYS[8], ARGV[17], ARGV[18], ARGV[19], ARGV[20], ARGV[16], ARGV[21], now)
if why then
  return {'amnesia', 'why', why, 'lat', redis.call('HGET', KEYS[7], 'lat') or fmt(now)}
end
-- Entries left by an earlier record of the same ID that Redis expired:
-- only terminal records expire, so only terminal indexes can hold one.
redis.call('ZREM', KEYS[4], ARGV[2])
redis.call('ZREM', KEYS[5], ARGV[2])
local r = {RL}
r[F.op], r[F.key], r[F.kind], r[F.fp], r[F.st] = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
r[F.ver], r[F.att], r[F.fs], r[F.ls], r[F.rr] = '1', ARGV[7], ARGV[8], ARGV[9], ARGV[10]
r[F.res], r[F.err], r[F.meta] = ARGV[11], ARGV[12], ARGV[13]
r[F.lo], r[F.lt], r[F.le] = ARGV[14], '1', fmt(now + tonumber(ARGV[15]))
r[F.ca], r[F.ua], r[F.cw], r[F.uw], r[F.aw] = fmt(now), fmt(now), ARGV[1], '', ''
save(KEYS[1], r, false)
redis.call('ZADD', KEYS[IX[ARGV[6]]], fmt(now), ARGV[2])
if terminal(ARGV[6]) then redis.call('PEXPIRE', KEYS[1], ARGV[16]) end
-- The caller knows every other field: send back only what the script chose.
return {'created', 'ca', fmt(now), 'ua', fmt(now), 'le', fmt(now + tonumber(ARGV[15])), '_ep', ep}
`)

// updateScript: ARGV = nonce, version, lease token, state, attempts, first
// sent, last sent, result ref, result, error, meta, fp, retention ms.
var updateScript = redis.NewScript(scriptPrelude + `
local r, raw = load(KEYS[1])
if not r then return {'notfound'} end
if r[F.uw] == ARGV[1] then return {'ok', save(KEYS[1], r, true)} end
local now = now_us()
if r[F.lo] == '' or r[F.lt] ~= ARGV[3] or now >= tonumber(r[F.le]) then return {'lost', raw} end
if r[F.ver] ~= ARGV[2] then return {'conflict', raw} end
local was = r[F.st]
if terminal(was) and was ~= ARGV[4] then return {'terminal', raw} end
local op = r[F.op]
if was ~= ARGV[4] then redis.call('ZREM', KEYS[IX[was]], op) end
redis.call('ZADD', KEYS[IX[ARGV[4]]], fmt(now), op)
r[F.st], r[F.att], r[F.fs], r[F.ls], r[F.rr] = ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
r[F.res], r[F.err], r[F.meta], r[F.fp] = ARGV[9], ARGV[10], ARGV[11], ARGV[12]
r[F.ver], r[F.ua], r[F.uw] = fmt(tonumber(r[F.ver]) + 1), fmt(now), ARGV[1]
save(KEYS[1], r, true)
local updated = {'updated', 'op', op, 'key', r[F.key], 'kind', r[F.kind], 'lo', r[F.lo], 'lt', r[F.lt],
  'le', r[F.le], 'ca', r[F.ca], 'ua', r[F.ua], 'ver', r[F.ver]}
if terminal(ARGV[4]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[13])
  -- A terminal record expires its retention after its last update, which
  -- is its index score (both by this server's clock): drop (two at a time)
  -- the entries older than that, so the index does not outgrow the data
  -- when nobody runs DeleteExpired. Decided by score alone: a record key is
  -- not looked at, since one the script does not name may be on another
  -- node while its slot migrates.
  local ix = KEYS[IX[ARGV[4]]]
  local dead = now - tonumber(ARGV[13]) * 1000
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', ix, '-inf', '(' .. fmt(dead), 'LIMIT', 0, 2)) do
    redis.call('ZREM', ix, id)
  end
end
-- The caller knows the fields it wrote: send back the others.
return updated
`)

// acquireScript: ARGV = nonce, owner, ttl µs.
var acquireScript = redis.NewScript(scriptPrelude + `
local r, raw = load(KEYS[1])
if not r then return {'notfound'} end
if r[F.aw] == ARGV[1] then return {'ok', save(KEYS[1], r, true)} end
local now = now_us()
if r[F.lo] ~= '' and r[F.lo] ~= ARGV[2] and now < tonumber(r[F.le]) then return {'held', raw} end
r[F.lo], r[F.lt], r[F.le], r[F.aw] = ARGV[2], fmt(tonumber(r[F.lt]) + 1), fmt(now + tonumber(ARGV[3])), ARGV[1]
return {'ok', save(KEYS[1], r, true)}
`)

// renewScript: ARGV = token, ttl µs. Resending it only extends again.
var renewScript = redis.NewScript(scriptPrelude + `
local r, raw = load(KEYS[1])
if not r then return {'notfound'} end
local now = now_us()
if r[F.lt] ~= ARGV[1] or now >= tonumber(r[F.le]) then return {'lost', raw} end
r[F.le] = fmt(now + tonumber(ARGV[2]))
return {'ok', save(KEYS[1], r, true)}
`)

// releaseScript: ARGV = token.
var releaseScript = redis.NewScript(scriptPrelude + `
local r = load(KEYS[1])
if not r or r[F.lt] ~= ARGV[1] then return {'ok'} end
r[F.lo], r[F.le] = '', fmt(now_us())
save(KEYS[1], r, true)
return {'ok'}
`)

// deleteScript removes terminal records of one shard. KEYS = the succeeded
// and failed indexes, the shard's marker; ARGV = cut-off µs (exclusive),
// limit, record key prefix. Returns how many records (or index entries of
// records Redis had already expired) it removed. The marker keeps the
// latest cut-off that removed something (rb), so that a removed record is
// not taken for a lost one.
var deleteScript = redis.NewScript(recordPrelude + `
local cutoff = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local n = 0
for i = 1, 2 do
  if n >= limit then break end
  local ids = redis.call('ZRANGEBYSCORE', KEYS[i], '-inf', '(' .. ARGV[1], 'LIMIT', 0, limit - n)
  for _, id in ipairs(ids) do
    local rk = ARGV[3] .. id
    local r = load(rk)
    local h = r and {r[F.st], r[F.ua]} or {}
    if not h[1] then
      -- Expired by its retention TTL (or, while the slot migrates, moved
      -- to another node: then it is terminal and past the cut-off, and
      -- its TTL removes it).
      redis.call('ZREM', KEYS[i], id)
      n = n + 1
    elseif (h[1] == 'succeeded' or h[1] == 'failed') and tonumber(h[2]) < cutoff then
      redis.call('DEL', rk)
      redis.call('ZREM', KEYS[i], id)
      n = n + 1
    elseif not (h[1] == 'succeeded' or h[1] == 'failed') then
      -- A stale entry: the record was re-created and lives in another index.
      redis.call('ZREM', KEYS[i], id)
    end
  end
end
if n > 0 and tonumber(redis.call('HGET', KEYS[3], 'rb') or '0') < cutoff then
  redis.call('HSET', KEYS[3], 'rb', ARGV[1])
end
return n
`)

// markScript reads a shard's marker, writing it first when it is missing
// and ARGV[1] says so. KEYS = the marker; ARGV = mode ('read', 'init' or
// 'lost'), epoch, shards, reason (for 'lost'). Returns {now µs, field,
// value, ...}.
var markScript = redis.NewScript(scriptPrelude + `
local now = now_us()
if redis.call('HEXISTS', KEYS[1], 'ep') == 0 then
  if ARGV[1] == 'init' then
    redis.call('HSET', KEYS[1], 'ep', ARGV[2], 'st', 'ok', 'sh', ARGV[3], 'ia', fmt(now), 'rl', RL)
  elseif ARGV[1] == 'lost' then
    redis.call('HSET', KEYS[1], 'ep', ARGV[2], 'st', 'lost', 'sh', ARGV[3], 'ia', fmt(now), 'why', ARGV[4], 'lat', fmt(now), 'rl', RL)
  end
end
local r = redis.call('HGETALL', KEYS[1])
table.insert(r, 1, fmt(now))
return r
`)

// sweepScript runs the loss check on one shard without creating anything
// (Amnesia, and every shard after one Create found a loss). KEYS = the
// marker, the last record the caller created there (the marker if none);
// ARGV = epoch, lastca, verified, newep, retention ms, shards (as check
// takes them). Returns {now µs, field, value, ...} of the marker.
var sweepScript = redis.NewScript(scriptPrelude + amnesiaPrelude + `
local now = now_us()
check(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], now)
local r = redis.call('HGETALL', KEYS[1])
table.insert(r, 1, fmt(now))
return r
`)

// acceptScript ends a detected loss in one shard: a new epoch, state ok,
// the acceptance's time and note. KEYS = the marker; ARGV = new epoch,
// note. A shard that is not lost is left alone. Returns {now µs, field,
// value, ...} of the marker.
var acceptScript = redis.NewScript(scriptPrelude + `
local now = now_us()
if redis.call('HGET', KEYS[1], 'st') == 'lost' then
  redis.call('HSET', KEYS[1], 'ep', ARGV[1], 'st', 'ok', 'aat', fmt(now), 'note', ARGV[2])
  redis.call('HDEL', KEYS[1], 'why', 'lat')
end
local r = redis.call('HGETALL', KEYS[1])
table.insert(r, 1, fmt(now))
return r
`)
