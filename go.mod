module github.com/vigil-hpc/vigil

go 1.26
