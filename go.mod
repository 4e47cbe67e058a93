module github.com/vigil-hpc/vigil

go 1.26.0

require (
	github.com/Mellanox/rdmamap v1.2.0
	github.com/dchest/siphash v1.2.3
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.49.0
	pgregory.net/rapid v1.3.0
)

require (
	github.com/vishvananda/netlink v1.3.1 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
)
