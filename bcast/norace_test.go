//go:build !race

package bcast

const raceEnabled = false
