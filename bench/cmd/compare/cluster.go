package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// cluster is three cluster-enabled masters this command started, each
// with a third of the slots: the cluster rows run on it.
type cluster struct {
	nodes  []*server
	admins []*goredis.Client
}

// startCluster starts three masters of bin, joins them, assigns every
// slot and waits for cluster_state:ok on each.
func startCluster(ctx context.Context, bin string) (_ *cluster, err error) {
	c := &cluster{}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	var bus []string
	for range 3 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		srv, err := startServer(ctx, bin, "cluster-enabled yes", "cluster-config-file nodes.conf",
			"cluster-node-timeout 5000", "cluster-port "+strconv.Itoa(port))
		if err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, srv)
		c.admins = append(c.admins, goredis.NewClient(&goredis.Options{Addr: srv.addr}))
		bus = append(bus, strconv.Itoa(port))
	}
	for i, n := range c.nodes[1:] {
		_, port, _ := strings.Cut(n.addr, ":")
		if err := c.admins[0].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", port, bus[i+1]).Err(); err != nil {
			return nil, fmt.Errorf("cluster meet: %w", err)
		}
	}
	const slots = 16384
	for i, a := range c.admins {
		lo, hi := i*slots/3, (i+1)*slots/3-1
		if err := a.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			return nil, fmt.Errorf("cluster addslotsrange: %w", err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, a := range c.admins {
		for {
			info, err := a.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, "cluster_known_nodes:3") {
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("cluster not ok after 30s: %v %q", err, info)
			}
			sleep(ctx, 50*time.Millisecond)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
	}
	return c, nil
}

// addrs are the nodes' host:port.
func (c *cluster) addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.addr
	}
	return out
}

func (c *cluster) close() {
	for _, a := range c.admins {
		_ = a.Close()
	}
	for _, n := range c.nodes {
		n.close()
	}
}
