package main

// The drivers the command can reach, by blank import. The memory driver is
// built into the root package and needs no import.
import (
	_ "github.com/fleetstore/fleetstore/drivers/memcached"
	_ "github.com/fleetstore/fleetstore/drivers/redis"
	_ "github.com/fleetstore/fleetstore/drivers/valkey"
)
