// conn_churn: what a new TCP connection per extender call costs, measured with
// Go's own HTTP client (the client kube-scheduler's extender calls use) against
// an extender server (bench/baseline_server or vramd) on loopback. Issue 17:
// while binds overlap, kube-scheduler's 2-idle-connection pool makes it open a
// connection for about every second pod; this puts a CPU figure on that.
//
//	go run bench/go/conn_churn.go -url http://127.0.0.1:PORT/scheduler/filter \
//	    -body tests/data/extender/filter-priorityclass.json -server-pid PID [-n 20000]
//
// It runs the same N POSTs twice, once on one kept-alive connection and once
// with a new connection for each (DisableKeepAlives), and prints the CPU time of
// this client and of the server process (from /proc/PID/stat) per request in
// each mode; the difference is the cost of one more connection. Standard
// library only; bench only, never run by the test command.
//
//	go run bench/go/conn_churn.go -serve-raw
//
// instead serves, on a free loopback port it prints, the least an HTTP/1.1
// extender can do: read a request (headers, Content-Length body) and answer a
// fixed small JSON in one write. Pointed at it, the client's figures are a
// floor for any server library.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func clientCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU: utime + stime of a process, from /proc/PID/stat (clock ticks of 10 ms).
func serverCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		panic(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * 10 * time.Millisecond
}

func run(url string, body []byte, n int, churn bool, pid int) (client, server, wall time.Duration) {
	tr := &http.Transport{DisableKeepAlives: churn}
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	c0, s0, t0 := clientCPU(), serverCPU(pid), time.Now()
	for i := 0; i < n; i++ {
		resp, err := c.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			panic(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			panic(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			panic(fmt.Sprintf("HTTP %d", resp.StatusCode))
		}
	}
	tr.CloseIdleConnections()
	return clientCPU() - c0, serverCPU(pid) - s0, time.Since(t0)
}

// serveRaw answers every request on every connection with one fixed answer,
// written with one write.
func serveRaw() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	fmt.Printf("listening on %s (pid %d)\n", ln.Addr(), os.Getpid())
	body := `{"NodeNames":["a","b"],"FailedNodes":{},"Error":""}`
	answer := []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		len(body), body))
	for {
		c, err := ln.Accept()
		if err != nil {
			panic(err)
		}
		go func(c net.Conn) {
			defer c.Close()
			r := bufio.NewReaderSize(c, 64<<10)
			for {
				n := 0
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if line == "\r\n" {
						break
					}
					if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Content-Length") {
						n, _ = strconv.Atoi(strings.TrimSpace(v))
					}
				}
				if _, err := io.CopyN(io.Discard, r, int64(n)); err != nil {
					return
				}
				if _, err := c.Write(answer); err != nil {
					return
				}
			}
		}(c)
	}
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "-serve-raw" {
		serveRaw()
		return
	}
	url := flag.String("url", "", "the verb's URL, e.g. http://127.0.0.1:PORT/scheduler/filter")
	bodyFile := flag.String("body", "", "request body (an ExtenderArgs JSON)")
	pid := flag.Int("server-pid", 0, "the server's process id (its CPU time is read from /proc)")
	n := flag.Int("n", 20000, "requests per mode")
	flag.Parse()
	body, err := os.ReadFile(*bodyFile)
	if err != nil || *url == "" || *pid == 0 {
		fmt.Fprintln(os.Stderr, "usage: conn_churn -url URL -body FILE -server-pid PID [-n N]")
		os.Exit(2)
	}
	run(*url, body, 500, false, *pid) // warm-up
	for _, churn := range []bool{false, true, false, true} {
		cl, sv, wall := run(*url, body, *n, churn, *pid)
		mode := "one kept-alive connection"
		if churn {
			mode = "a new connection per call "
		}
		per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(*n) }
		fmt.Printf("%s: client %.1f us, server %.1f us, both %.1f us of CPU per call; wall %.1f us per call\n",
			mode, per(cl), per(sv), per(cl+sv), per(wall))
	}
}
