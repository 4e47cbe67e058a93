// Package limit bounds what an outsider can make a Vigil process spend
// through the sockets it listens on: log lines (Log: one line per reason
// per interval, with a count of the lines suppressed), accept loops that
// back off when the process is out of file descriptors instead of spinning
// (Accept), listeners that cap the connections open at once (Cap), and a
// cap on the connections that have not identified themselves yet, the
// oldest evicted first (Pending).
package limit
