// Package memcached is the fleetstore driver for memcached, on
// github.com/bradfitz/gomemcache. Import it for its side effect:
//
//	import _ "github.com/fleetstore/fleetstore/drivers/memcached"
//
//	store, err := fleetstore.Open("memcached://cache1:11211,cache2:11211?timeout=50ms")
//	store, err := fleetstore.Open("memcacheds://cache1:11211?tls_ca_file=/etc/fleet/ca.pem") // TLS
//
// # URL
//
//	memcached://HOST[:PORT][,HOST[:PORT]...][?PARAMS]
//	memcacheds://HOST[:PORT][,HOST[:PORT]...][?PARAMS]   every connection over TLS
//
// Every host is one server (port 11211 when left out); several servers
// shard the items client-side, all items of one tenant on one server (the
// CRC-32 of the tenant's key token picks it, as gomemcache's ServerList
// does for whole keys). Hosts are resolved on the first call, never in
// Open, and a failed resolution is ErrUnavailable and retried by the next
// call. The URL takes no user, password or path. Parameters:
//
//	timeout         the default per-call budget (Go duration, default 100ms)
//	key_prefix      the namespace of every key (default "fleetstore")
//	max_conns       the most connections the Store opens to each server
//	                (default 64, or max_idle_conns when that is set
//	                higher): a call that finds them all in use waits for
//	                one, no longer than its budget (then ErrTimeout)
//	max_idle_conns  idle connections kept per server (default 64, at most
//	                max_conns): set it to the usual number of concurrent
//	                calls
//
// and, for memcacheds:// only (memcached -Z, --enable-ssl):
//
//	skip_verify     true: the servers' certificates are not checked
//	                (default false)
//	tls_ca_file     PEM file of the CAs that verify the servers (default
//	                the system's roots)
//	tls_cert_file   PEM file of the client certificate, for a server with
//	                ssl_verify_mode=2 (require); needs tls_key_file
//	                (default none)
//	tls_key_file    PEM file of that certificate's private key
//
// For example, a Store whose node makes up to 32 calls at once, on two
// servers:
//
//	memcached://cache1:11211,cache2:11211?timeout=50ms&max_conns=32&max_idle_conns=32
//
// and a Store on servers that require a client certificate, with a CA of
// its own (one URL, on two lines here):
//
//	memcacheds://cache1:11211,cache2:11211?tls_ca_file=/etc/fleet/ca.pem&
//	  tls_cert_file=/etc/fleet/edge.pem&tls_key_file=/etc/fleet/edge-key.pem
//
// An unknown parameter is an error at Open.
//
// The cap is per Store and per server: a call holds at most one socket to
// each server it touches, so a Store holds at most max_conns sockets to
// each server, whatever the number of callers. The default, 64, is the
// concurrency the package is measured at (fleetstore bench -c 64): a call
// holds its connection for its 1–3 round trips, well under a millisecond
// on a local network, so 64 connections serve tens of thousands of calls
// a second and callers beyond them queue briefly instead of dialing.
// More sockets do not make memcached faster (its few worker threads serve
// them all) and each costs a dial and a file descriptor on both sides:
// without a cap a burst of 512 callers dialed about 400 sockets at once
// and half its calls ran out of budget. Mind memcached's own limit (-c,
// default 1024 connections): the fleet's Stores × max_conns must stay
// below it.
//
// # TLS
//
// TLS is a scheme of its own, memcacheds://, as rediss:// and valkeys://
// are for the other drivers, with the same TLS parameters. The files are
// read by Open, once: a missing or malformed file is ErrInvalid at Open
// naming the parameter; a renewed certificate takes a new Store. Every
// connection is TLS 1.2 or later (crypto/tls, through gomemcache's
// DialContext), its handshake within the call's budget, each server
// verified under its host as written in the URL (hosts are resolved to
// addresses before the dial). A server whose certificate does not verify,
// or that refuses the client certificate, fails every call with
// ErrUnavailable (fail closed). A TLS handshake costs a round trip or two
// per new connection; the pool keeps connections (max_idle_conns), so it
// is paid once per connection, not per call.
//
// # Items
//
// Memcached has no scripts and no multi-key atomicity, so the contract is
// kept with compare-and-swap on two items:
//
//	PREFIX:b:T  the bucket item of tenant T: "1 KIND:TAT ... KIND@S-E=N
//	            ..." in µs: every bucket's TAT and every quota window's
//	            count N in [S, E). One item, so Reset is one delete; it
//	            expires at its largest TAT or window end
//	PREFIX:c:D  a claim item, binary: the state ('p' pending, 'c'
//	            committed), when it expires (µs, 8 bytes big-endian),
//	            len(hook_id) (a uvarint), hook_id and node; it expires at
//	            that time
//
// T is the tenant itself when 1–40 bytes of [A-Za-z0-9._-] ("r" + part),
// otherwise "h" + base64url(SHA-256(part)): distinct tenants never share a
// bucket (V2). D is 27 bytes of base64url over the tenant's server hash (4
// bytes) and 128 bits of SHA-256 over the tenant, source_id and key, each
// preceded by its length. Keys are legal memcached keys (≤ 111 bytes,
// printable, V3). A value that does not parse is an error, never a panic
// (V4).
//
// A claim key is a digest, so two claims share one with a probability:
// among n claims held under one key_prefix (all tenants together), below
// n²/2^129. A fleet holding 2.6 billion claims (10 000 hooks/s, 72 h) meets
// a collision with a probability of 1e-20; the hook so met would be
// answered Duplicate (a lost webhook) or Pending. The digest is SHA-256, so
// a sender who picks its own event ids cannot aim one at another sender's
// claim (a second preimage of 128 bits).
//
// The driver reads this layout only: a store moves to another layout under
// a new key_prefix.
//
// # Memory
//
// A memcached 1.6 item is a 56-byte header (48, and 8 for the CAS the
// driver needs: memcached must not run with -C), the key and a NUL, the
// value and CR LF; it is stored in the smallest slab chunk that holds it.
// With the default -n 48 -f 1.25 the chunks are 96, 120, 152, 192, 240 …
// bytes. A committed claim item is 56 + 3 + (len(key_prefix) + 30) + (10
// + len(hook_id) + len(node)) bytes (one more for a hook_id of 128 bytes
// or more): 142 for the default key_prefix, a
// 26-byte hook_id and a 7-byte node, in a 152-byte chunk.
// The 152-byte chunk is the floor at these settings of any layout that
// keeps such a hook_id as it is, the node and a 128-bit digest: the
// 120-byte chunk leaves 61 bytes for key and value, and the hook_id (26),
// node (7), expiry (8) and the digest as key characters (22) alone take
// 63. The floor of any item is the smallest chunk, 96 bytes (-n 48: 37
// bytes of key and value). Every byte of key_prefix, hook_id and node
// counts: with that hook_id a node of more than 17 bytes (a Kubernetes pod
// name, the webhook handler's default os.Hostname) moves the claim into a
// 192-byte chunk. A smaller growth factor (-f 1.05) wastes less: the same
// claim takes a 144-byte chunk. The hash table adds 8 bytes a bucket, 5–11
// bytes per item. BenchmarkClaimMemory measures all of it on a real
// server.
//
// A calendar quota takes no item of its own: its window's count is 36 +
// len(kind) + the count's digits bytes of its tenant's bucket item. A
// webhook edge's item with hooks and bytes buckets is 144 bytes for a
// 24-byte tenant, in a 152-byte chunk; a monthly hooks quota at 10 000
// used makes it 190, in a 192-byte chunk (TestWindowItemBytes). A window
// that has passed is left out at the item's next write, so a quota holds
// one window, two for a while after a boundary.
//
// # Hit
//
// A Hit reads the bucket and claim items in one gets (they share a server),
// then, at the client's now, decides the claim by claim.Hit and answers in
// the order of package claim:
//
//  1. claim pending for the same hook: OK, nothing written;
//  2. the charges on the bucket item read: a bucket by GCRA (package
//     gcra) on its TAT; a quota by its count in the window that holds
//     now (CONTRACT §3.2). A denial of any is RateLimited and writes
//     nothing;
//  3. claim committed: Duplicate; pending for another hook: Pending, with
//     its remaining time; nothing written;
//  4. the claim: add (cas over an item whose stored expiry has passed);
//     EXISTS or NOT_STORED means another hit won: read both and go to 1;
//  5. the bucket item: cas with the new TATs and counts (add when
//     absent); a conflict means a concurrent charge: read the bucket
//     item alone and go to 2 holding
//     the claim. When the charges recomputed there are denied, the claim is
//     given back first — a cas of the very item written, expiring at once —
//     and the Hit is RateLimited with nothing taken (G3).
//
// The claim is written before the bucket because a claim is undone
// exactly (a cas back to nothing) while a GCRA charge is not (a TAT moved
// by other charges meanwhile cannot be rolled back). So a denial, a
// duplicate or a pending claim spends no charge, and a lost bucket race
// leaves no claim. The buckets and quota windows of a Hit are one item,
// decided together and written by one cas: a Hit denied by a quota takes
// nothing from its buckets and one denied by a bucket nothing from its
// quotas. Of two Hits that read the same count, only the first cas
// holds, so Stores at once admit exactly a quota's units. Contention retries back off a random time (up to
// 50µs·2^attempt, at most 2ms) and stop at the call's deadline. Within one
// Store, Hits that charge the same tenant take turns (one of 1024 striped
// one-slot semaphores, left at the deadline) instead of racing each
// other's cas: under a hot tenant most cas would lose, each loss costing
// two more round trips. Stores of other processes still meet under cas.
//
// Round trips per Hit: with charges and a claim, 3 in the common path (gets,
// add, cas); with charges only or a claim only, 2; a denial, duplicate,
// pending or own-retry answer, 1. Each conflict adds 1–2; an undo adds 2.
// Quotas add none: their counts are in the bucket item.
//
// # Commit, Release, Reset, Ping, Peek
//
// Commit and Release read all their claims with one gets per server, then
// settle each under cas by claim.Settle, comparing the stored hook_id (the
// claim's fencing token): Commit writes a committed item expiring TTL from now (add when
// absent); Release of the hook's own pending claim is a cas that writes an
// empty item expiring at once (gomemcache has no cas-delete; memcached
// expires an item with a negative exptime immediately). A conflict re-reads
// that claim and decides again. Each Commit or Release settles its own
// claims: calls are not grouped into shared rounds as on Redis and Valkey
// (memcached has no script to settle many claims in one request; each
// claim is its own cas). Reset deletes the bucket item, quota counts
// included. Ping sends version to every server. Peek (driver.Peeker) gets
// the bucket item, one round trip, and reads its TATs and quota counts at
// the client's now: a get moves no expiry (touch and gat do).
//
// # Failure cases
//
// A write whose reply is lost (timeout, reset) may or may not have been
// applied, and is never re-sent: the call returns ErrTimeout or
// ErrUnavailable. Only a read (gets, and the delete of Reset, and version)
// is sent once more, and only when it failed on a pooled socket the server
// had closed (EOF, reset: a restart), so a restart between two calls is
// invisible (T5). The possible leftovers of a lost write never charge
// twice:
//
//   - the claim add was lost or applied but the bucket was not charged: a
//     retry of the Hit by the same hook finds its own pending claim and
//     gets OK, charged once at most (here: not at all); otherwise the
//     claim frees after PendingTTL;
//   - the bucket cas was lost: the claim is pending for the hook; a retry
//     is OK without a second charge;
//   - the undo of step 5 fails: the Hit returns the error, not
//     RateLimited, and the claim stays pending until PendingTTL.
//
// A retry by the same hook that runs concurrently with its first attempt
// can see the pending claim of step 4 and return OK before the first
// attempt's charge is decided. A server that restarts or evicts loses
// buckets (full again), quota counts (the tenant's quotas admit their
// units again in the window) and claims (the key can be claimed again):
// memcached is a cache. By default it evicts the least recently used
// items when its memory is full; the Store warns once per such server
// (stats settings: evictions on), after its first Hit. Run memcached with
// -M, so that a full server refuses writes (calls fail) instead of
// forgetting, and with memory for the items (-m), or use Redis.
//
// # Time
//
// The clock is the client's wall clock in µs (G8): unlike the Redis drivers,
// which read the server's TIME, every fleet node charges on its own clock,
// and a node whose clock runs ahead by d sees buckets d emptier and claims
// expiring d earlier. Keep the fleet on NTP; a skew well below the
// emission intervals and TTLs in use is harmless. A quota counts in the
// window that holds the client's now, the one the node's Store computed:
// around a boundary, a node whose clock runs ahead by d counts in the
// next window d early.
//
// Memcached expiry counts whole seconds on a clock that ticks once a
// second: an item given n seconds lives between n-1 and n. Every exptime is
// therefore the time left rounded up, plus one second, so an item never
// expires before its TAT or claim expiry (a 1.9s TAT outlives 1s, G9) and
// lingers less than 2s past it (G7: the expiry granularity of this driver
// is 2s). The exact expiry is kept in µs in the
// value, so the driver treats a lingering item as absent. Memcached reads
// an exptime above 30 days (2 592 000 s) as an absolute Unix time, so
// longer ones are sent as the client's Unix time of expiry (C9): with
// clock skew between client and server, such items expire off by the skew.
// Absolute times are capped at 2038-01-19, the largest the protocol takes.
//
// # Budget
//
// gomemcache takes no context and applies one socket timeout per client.
// The driver keeps a pool of clients (sessions), each serving one call at
// a time and holding at most one socket per server, at most max_conns
// sessions alive at once; a call that finds max_conns in use waits in its
// own goroutine for one to be released, until its deadline (ErrTimeout)
// or Close (ErrClosed), first come first served. The driver lays the
// call's deadline on its session's sockets: every socket deadline
// gomemcache sets is capped at the call's deadline, dials use the call's
// context, and a cancelled context moves the deadlines to the past. A
// call therefore returns by its deadline even against a server that
// accepts and never answers (T1), and leaves no goroutine or socket
// behind it (T4): a socket that timed out is closed, the client is not
// reused. Close closes every idle socket and wakes every waiting caller.
package memcached
