package main

// The drivers the command can reach, by blank import. The memory driver is
// built into the root package and needs no import. Add each driver here as
// its package lands:
//
//	import (
//		_ "github.com/fleetstore/fleetstore/drivers/memcached"
//		_ "github.com/fleetstore/fleetstore/drivers/redis"
//		_ "github.com/fleetstore/fleetstore/drivers/valkey"
//	)
