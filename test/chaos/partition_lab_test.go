//go:build lab

package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A partition drops packets, as a cut network does: the controllers'
// connections to the member hang and time out, none is refused or reset.
// What it cuts is the controllers' way alone, the proxy in front of the
// member's API server that its joined kubeconfig names: the member's own
// components, its CoreDNS and the harness reach the API server directly.
// The rules live in a table of the run's own in the host's network, and
// match only loopback (the proxy listens on the member's address there).

// nftTable is the run's nftables table; its set cut holds the proxies'
// address . port pairs being dropped, both directions.
const nftTable = "inet mcs_chaos"

const nftRuleset = `table ` + nftTable + `
delete table ` + nftTable + `
table ` + nftTable + ` {
	set cut {
		type ipv4_addr . inet_service
	}
	chain output {
		type filter hook output priority filter; policy accept;
		oifname "lo" ip daddr . tcp dport @cut drop
		oifname "lo" ip saddr . tcp sport @cut drop
	}
}
`

// dropTable makes the run's table (one a previous run left is replaced)
// and deletes it when the test ends.
func dropTable(t *testing.T) {
	if err := nft(nftRuleset); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nft("delete table " + nftTable + "\n"); err != nil {
			t.Errorf("chaos: %v", err)
		}
	})
}

func nft(script string) error {
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft: %w: %s (script: %s)", err, strings.TrimSpace(string(out)), script)
	}
	return nil
}

// element is addr (host:port, IPv4) as an element of the set cut.
func element(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("{ %s . %s }", host, port), nil
}

// partition drops every packet to and from member e.Cluster's proxy for
// e.For. A heal that fails leaves the member cut off: the run fails.
func (r *run) partition(t *testing.T, e Event) error {
	addr := r.proxies[e.Cluster].Addr()
	el, err := element(addr)
	if err != nil {
		return err
	}
	if err := nft(fmt.Sprintf("add element %s cut %s\n", nftTable, el)); err != nil {
		return err
	}
	if err := dropped(addr); err != nil {
		t.Errorf("chaos: harness: partition of %s: %v", e.Cluster, err)
	}
	time.Sleep(e.For)
	if err := nft(fmt.Sprintf("delete element %s cut %s\n", nftTable, el)); err != nil {
		t.Errorf("chaos: harness: healing the partition of %s: %v", e.Cluster, err)
	}
	return nil
}

// dropped checks that a connection to addr now hangs, as the controllers'
// do: a dial that neither connects nor is refused, but times out.
func dropped(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err == nil {
		conn.Close()
		return fmt.Errorf("a connection to %s was made through the drop", addr)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			return fmt.Errorf("a connection to %s failed otherwise than by a timeout: %w", addr, err)
		}
	}
	return nil
}
