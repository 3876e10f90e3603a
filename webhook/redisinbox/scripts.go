package redisinbox

import "github.com/redis/go-redis/v9"

// Every write script gets the same KEYS, all under one hash tag:
//
//	KEYS[1] the record (hash)     KEYS[2] due (zset)     KEYS[3] leases by entity (hash)
//	KEYS[4..8] the state indexes: received, processing, processed, error, dead (zsets)
//
// and ARGV[1] a nonce, ARGV[2] the dedupe key. A script that already ran
// with this nonce (go-redis resends a command whose reply was lost) returns
// the result it gave then instead of applying twice.
//
// Time is Redis's: each script reads TIME once (Redis replicates a script's
// effects, not the script, so TIME is allowed before writes) and compares
// and sets every lease, due time and timestamp with it, so processes whose
// clocks disagree still agree on leases.
//
// Times stay strings end to end: Lua prints large numbers in %.14g, which
// would lose digits, so scripts compare them with tonumber() (exact for
// microsecond timestamps, below 2^53), store strings, and format sums with
// %.0f.
const clock = `
local tm = redis.call('TIME')
local now = tm[1] .. string.sub('000000' .. tm[2], -6)
local t = tonumber(now)
local function after(us) return string.format('%.0f', t + tonumber(us)) end
`

const prelude = `
local rec, due, ent = KEYS[1], KEYS[2], KEYS[3]
local ix = {received = KEYS[4], processing = KEYS[5], processed = KEYS[6], error = KEYS[7], dead = KEYS[8]}
local nonce, key = ARGV[1], ARGV[2]
if redis.call('HGET', rec, 'nonce') == nonce then
	return {redis.call('HGET', rec, 'nonce_res'), redis.call('HGETALL', rec)}
end
local function done(res)
	redis.call('HSET', rec, 'nonce', nonce, 'nonce_res', res)
	return {res, redis.call('HGETALL', rec)}
end
local function move(from, to, score)
	redis.call('ZREM', ix[from], key)
	redis.call('ZADD', ix[to], score, key)
end
` + clock

// insertScript: ARGV[3..6] event, entity, envelope id, payload.
var insertScript = redis.NewScript(prelude + `
if redis.call('EXISTS', rec) == 1 then
	redis.call('HINCRBY', rec, 'deliveries', 1)
	return done('exists')
end
redis.call('HSET', rec, 'event', ARGV[3], 'entity', ARGV[4], 'envelope_id', ARGV[5], 'payload', ARGV[6],
	'state', 'received', 'attempts', 0, 'deliveries', 1, 'last_error', '', 'next_at', now,
	'owner', '', 'token', 0, 'lease_exp', 0, 'received_at', now, 'updated_at', now)
redis.call('ZADD', due, now, key)
redis.call('ZADD', ix.received, now, key)
return done('inserted')
`)

// claimScript: ARGV[3] owner, ARGV[4] lease TTL (µs). The leases hash
// holds, per entity, "<expiry>|<key>" of the event last claimed: since a
// claim needs every other lease of its entity expired, that entry is the
// only one that can be live.
var claimScript = redis.NewScript(prelude + `
if redis.call('EXISTS', rec) == 0 then return {'notfound'} end
local st = redis.call('HGET', rec, 'state')
if st == 'processing' and t < tonumber(redis.call('HGET', rec, 'lease_exp')) then
	return {'held', redis.call('HGETALL', rec)}
end
if st ~= 'received' and st ~= 'error' and st ~= 'processing' then
	return {'wrong', redis.call('HGETALL', rec)}
end
local entity = redis.call('HGET', rec, 'entity')
local cur = redis.call('HGET', ent, entity)
if cur then
	local bar = string.find(cur, '|', 1, true)
	if string.sub(cur, bar + 1) ~= key and t < tonumber(string.sub(cur, 1, bar - 1)) then
		return {'busy', redis.call('HGETALL', rec)}
	end
end
local exp = after(ARGV[4])
redis.call('HSET', rec, 'state', 'processing', 'owner', ARGV[3], 'lease_exp', exp, 'updated_at', now)
redis.call('HINCRBY', rec, 'attempts', 1)
redis.call('HINCRBY', rec, 'token', 1)
redis.call('HSET', ent, entity, exp .. '|' .. key)
redis.call('ZADD', due, exp, key)
move(st, 'processing', now)
return done('ok')
`)

// renewScript: ARGV[3] token, ARGV[4] lease TTL (µs).
var renewScript = redis.NewScript(prelude + `
if redis.call('EXISTS', rec) == 0 then return {'notfound'} end
local r = redis.call('HMGET', rec, 'state', 'token', 'lease_exp', 'entity')
if r[1] ~= 'processing' or r[2] ~= ARGV[3] or t >= tonumber(r[3]) then
	return {'lost', redis.call('HGETALL', rec)}
end
local exp = after(ARGV[4])
redis.call('HSET', rec, 'lease_exp', exp)
redis.call('HSET', ent, r[4], exp .. '|' .. key)
redis.call('ZADD', due, exp, key)
return done('ok')
`)

// completeScript: ARGV[3] token, ARGV[4] state, ARGV[5] error, ARGV[6]
// retry after (µs), ARGV[7] "1" to give the attempt back.
var completeScript = redis.NewScript(prelude + `
if redis.call('EXISTS', rec) == 0 then return {'notfound'} end
local r = redis.call('HMGET', rec, 'state', 'token', 'entity', 'attempts')
if r[1] ~= 'processing' or r[2] ~= ARGV[3] then
	return {'lost', redis.call('HGETALL', rec)}
end
local to = ARGV[4]
local next_at = '0'
if to == 'received' or to == 'error' then next_at = after(ARGV[6]) end
redis.call('HSET', rec, 'state', to, 'next_at', next_at, 'owner', '', 'lease_exp', 0, 'updated_at', now)
if ARGV[5] ~= '' then redis.call('HSET', rec, 'last_error', ARGV[5]) end
if ARGV[7] == '1' and tonumber(r[4]) > 0 then redis.call('HINCRBY', rec, 'attempts', -1) end
local cur = redis.call('HGET', ent, r[3])
if cur and string.sub(cur, string.find(cur, '|', 1, true) + 1) == key then
	redis.call('HDEL', ent, r[3])
end
if to == 'received' or to == 'error' then
	redis.call('ZADD', due, next_at, key)
else
	redis.call('ZREM', due, key)
end
move('processing', to, now)
return done('ok')
`)

var retryScript = redis.NewScript(prelude + `
if redis.call('EXISTS', rec) == 0 then return {'notfound'} end
local st = redis.call('HGET', rec, 'state')
if st ~= 'dead' and st ~= 'error' then return {'wrong', redis.call('HGETALL', rec)} end
redis.call('HSET', rec, 'state', 'received', 'attempts', 0, 'next_at', now, 'updated_at', now)
redis.call('ZADD', due, now, key)
move(st, 'received', now)
return done('ok')
`)

// expireScript removes one processed or dead record last changed before
// ARGV[3] (µs, the caller's cut-off).
var expireScript = redis.NewScript(prelude + `
local r = redis.call('HMGET', rec, 'state', 'updated_at')
if r[1] == false then
	redis.call('ZREM', ix.processed, key)
	redis.call('ZREM', ix.dead, key)
	return {'gone'}
end
if (r[1] ~= 'processed' and r[1] ~= 'dead') or tonumber(r[2]) >= tonumber(ARGV[3]) then return {'kept'} end
redis.call('DEL', rec)
redis.call('ZREM', ix[r[1]], key)
redis.call('ZREM', due, key)
return {'deleted'}
`)

// Read scripts return {key1, fields1, key2, fields2, ...}: the records as
// they stood at one instant (a script runs alone), so a record moving
// between indexes meanwhile is read once, in one state.
//
// dueScript: KEYS[1] due (zset); ARGV[1] the record key prefix, ARGV[2]
// limit. Due by Redis's clock. The records come without their payload: the
// Inbox needs only their keys and entities, and copying bodies here would
// hold Redis for nothing.
var dueScript = redis.NewScript(clock + `
local keys = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local fields = {'event', 'entity', 'envelope_id', 'state', 'attempts', 'deliveries', 'last_error', 'next_at',
	'owner', 'token', 'lease_exp', 'received_at', 'updated_at'}
local out = {}
for _, k in ipairs(keys) do
	local v = redis.call('HMGET', ARGV[1] .. k, unpack(fields))
	if v[4] then
		local h = {}
		for i, f in ipairs(fields) do
			table.insert(h, f)
			table.insert(h, v[i] or '')
		end
		table.insert(out, k)
		table.insert(out, h)
	end
end
return out
`)

// listScript: KEYS the state indexes to read; ARGV[1] the record key
// prefix, ARGV[2] the score bound ("+inf" or "(µs"), ARGV[3] limit. The
// candidates of every index are merged by (UpdatedAt, key).
var listScript = redis.NewScript(`
local limit = tonumber(ARGV[3])
local cands = {}
for _, ixk in ipairs(KEYS) do
	local zs = redis.call('ZRANGEBYSCORE', ixk, '-inf', ARGV[2], 'WITHSCORES', 'LIMIT', 0, limit)
	for i = 1, #zs, 2 do
		table.insert(cands, {k = zs[i], s = tonumber(zs[i + 1])})
	end
end
table.sort(cands, function(a, b)
	if a.s ~= b.s then return a.s < b.s end
	return a.k < b.k
end)
local out = {}
for i = 1, math.min(limit, #cands) do
	local k = cands[i].k
	local h = redis.call('HGETALL', ARGV[1] .. k)
	if #h > 0 then
		table.insert(out, k)
		table.insert(out, h)
	end
end
return out
`)
