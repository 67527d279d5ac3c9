// Package loopback picks ports on 127.0.0.1 for the servers that tests and
// benchmarks start.
package loopback

import (
	"fmt"
	"net"
)

// FreePorts finds n distinct ports free for both TCP and UDP on 127.0.0.1.
// All are held until every one is found, so none is picked twice; they are
// released on return, so a caller must cope with one taken meanwhile.
func FreePorts(n int) ([]int, error) {
	var ports []int
	var held []func() error
	defer func() {
		for _, release := range held {
			release()
		}
	}()
	for len(ports) < n {
		tl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		held = append(held, tl.Close)
		port := tl.Addr().(*net.TCPAddr).Port
		ul, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // UDP side taken: try another
		}
		held = append(held, ul.Close)
		ports = append(ports, port)
	}
	return ports, nil
}
