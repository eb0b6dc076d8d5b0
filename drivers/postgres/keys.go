package postgres

import (
	"crypto/sha256"
	"encoding/binary"
	"hash/fnv"

	"github.com/fleetstore/fleetstore/driver"
)

// claimID is the key of a claim's row: the SHA-256 of key_prefix, tenant,
// source_id and key, each after its length, so that no two claims share
// one (three 1 KiB parts would exceed a btree index row).
func claimID(prefix string, c *driver.Claim) []byte {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, part := range [...]string{prefix, c.Tenant, c.SourceID, c.Key} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(part)))])
		h.Write([]byte(part))
	}
	return h.Sum(nil)
}

// tenantKey is the 64-bit key of (key_prefix, tenant): the Hit's advisory
// lock, which serializes the Hits of a tenant, and a claim row's tkey. Two
// tenants that share one only wait for each other.
func tenantKey(prefix, tenant string) int64 {
	h := fnv.New64a()
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(prefix)))])
	h.Write([]byte(prefix))
	h.Write([]byte(tenant))
	return int64(h.Sum64())
}
