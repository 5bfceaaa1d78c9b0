// goproxy: a minimal TCP forwarder used as a benchmark peer for uring-fwd.
// Accepts on -listen, dials -upstream, and copies both directions with io.Copy
// (which uses splice(2) on Linux for TCP->TCP), propagating half-close with CloseWrite.
package main

import (
	"flag"
	"io"
	"log"
	"net"
	"time"
)

func pipe(dst, src *net.TCPConn, done chan<- struct{}) {
	_, _ = io.Copy(dst, src)
	_ = dst.CloseWrite()
	done <- struct{}{}
}

func handle(client *net.TCPConn, upstream string) {
	defer client.Close()
	c, err := net.DialTimeout("tcp", upstream, 5*time.Second)
	if err != nil {
		return
	}
	up := c.(*net.TCPConn)
	defer up.Close()
	done := make(chan struct{}, 2)
	go pipe(up, client, done)
	go pipe(client, up, done)
	<-done
	<-done
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "listen address")
	upstream := flag.String("upstream", "", "upstream address")
	flag.Parse()
	if *upstream == "" {
		log.Fatal("-upstream required")
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	tl := ln.(*net.TCPListener)
	for {
		c, err := tl.AcceptTCP()
		if err != nil {
			log.Print(err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go handle(c, *upstream)
	}
}
