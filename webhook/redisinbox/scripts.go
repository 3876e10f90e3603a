package redisinbox

import "github.com/redis/go-redis/v9"

// Every write script gets the same KEYS, all under one hash tag:
//
//	KEYS[1] the record (hash)     KEYS[2] due (zset)     KEYS[3] leases by entity (hash)
//	KEYS[4..8] the state indexes: received, processing, processed, error, dead (zsets)
//
// and ARGV[1] a nonce, ARGV[2] the dedupe key, ARGV[3] now (µs). A script
// that already ran with this nonce (go-redis resends a command whose reply
// was lost) returns the result it gave then instead of applying twice.
//
// Times stay strings end to end: Lua prints large numbers in %.14g, which
// would lose digits, so scripts only compare them with tonumber() (exact for
// microsecond timestamps, below 2^53) and store the strings they were given.
const prelude = `
local rec, due, ent = KEYS[1], KEYS[2], KEYS[3]
local ix = {received = KEYS[4], processing = KEYS[5], processed = KEYS[6], error = KEYS[7], dead = KEYS[8]}
local nonce, key, now = ARGV[1], ARGV[2], ARGV[3]
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
`

// insertScript: ARGV[4..7] event, entity, envelope id, payload.
var insertScript = redis.NewScript(prelude + `
if redis.call('EXISTS', rec) == 1 then
	redis.call('HINCRBY', rec, 'deliveries', 1)
	return done('exists')
end
redis.call('HSET', rec, 'event', ARGV[4], 'entity', ARGV[5], 'envelope_id', ARGV[6], 'payload', ARGV[7],
	'state', 'received', 'attempts', 0, 'deliveries', 1, 'last_error', '', 'next_at', now,
	'owner', '', 'token', 0, 'lease_exp', 0, 'received_at', now, 'updated_at', now)
redis.call('ZADD', due, now, key)
redis.call('ZADD', ix.received, now, key)
return done('inserted')
`)

// claimScript: ARGV[4] owner, ARGV[5] lease expiry. The leases hash holds,
// per entity, "<expiry>|<key>" of the event last claimed: since a claim
// needs every other lease of its entity expired, that entry is the only one
// that can be live.
var claimScript = redis.NewScript(prelude + `
if redis.call('EXISTS', rec) == 0 then return {'notfound'} end
local st = redis.call('HGET', rec, 'state')
local t = tonumber(now)
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
redis.call('HSET', rec, 'state', 'processing', 'owner', ARGV[4], 'lease_exp', ARGV[5], 'updated_at', now)
redis.call('HINCRBY', rec, 'attempts', 1)
redis.call('HINCRBY', rec, 'token', 1)
redis.call('HSET', ent, entity, ARGV[5] .. '|' .. key)
redis.call('ZADD', due, ARGV[5], key)
move(st, 'processing', now)
return done('ok')
`)

// renewScript: ARGV[4] token, ARGV[5] new lease expiry.
var renewScript = redis.NewScript(prelude + `
if redis.call('EXISTS', rec) == 0 then return {'notfound'} end
local r = redis.call('HMGET', rec, 'state', 'token', 'lease_exp', 'entity')
if r[1] ~= 'processing' or r[2] ~= ARGV[4] or tonumber(now) >= tonumber(r[3]) then
	return {'lost', redis.call('HGETALL', rec)}
end
redis.call('HSET', rec, 'lease_exp', ARGV[5])
redis.call('HSET', ent, r[4], ARGV[5] .. '|' .. key)
redis.call('ZADD', due, ARGV[5], key)
return done('ok')
`)

// completeScript: ARGV[4] token, ARGV[5] state, ARGV[6] error, ARGV[7] next attempt.
var completeScript = redis.NewScript(prelude + `
if redis.call('EXISTS', rec) == 0 then return {'notfound'} end
local r = redis.call('HMGET', rec, 'state', 'token', 'entity')
if r[1] ~= 'processing' or r[2] ~= ARGV[4] then
	return {'lost', redis.call('HGETALL', rec)}
end
local to = ARGV[5]
redis.call('HSET', rec, 'state', to, 'next_at', ARGV[7], 'owner', '', 'lease_exp', 0, 'updated_at', now)
if ARGV[6] ~= '' then redis.call('HSET', rec, 'last_error', ARGV[6]) end
local cur = redis.call('HGET', ent, r[3])
if cur and string.sub(cur, string.find(cur, '|', 1, true) + 1) == key then
	redis.call('HDEL', ent, r[3])
end
if to == 'received' or to == 'error' then
	redis.call('ZADD', due, ARGV[7], key)
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

// expireScript removes one processed record older than ARGV[4] (µs).
var expireScript = redis.NewScript(prelude + `
local r = redis.call('HMGET', rec, 'state', 'updated_at')
if r[1] == false then
	redis.call('ZREM', ix.processed, key)
	return {'gone'}
end
if r[1] ~= 'processed' or tonumber(r[2]) >= tonumber(ARGV[4]) then return {'kept'} end
redis.call('DEL', rec)
redis.call('ZREM', ix.processed, key)
redis.call('ZREM', due, key)
return {'deleted'}
`)
