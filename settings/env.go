package settings

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ParseEnv reads s's variable with getenv into dst: a *time.Duration
// (Duration), *int (Int), *bool (Bool: 0 or 1), or *string (String,
// Choice: one of Choices), as s.Kind says. An unset or empty variable
// leaves dst as it is. Errors name the variable and its value.
func ParseEnv(s *Setting, getenv func(string) string, dst any) error {
	var fits bool
	switch dst.(type) {
	case *time.Duration:
		fits = s.Kind == Duration
	case *int:
		fits = s.Kind == Int
	case *bool:
		fits = s.Kind == Bool
	case *string:
		fits = s.Kind == String || s.Kind == Choice
	}
	if !fits || s.Env == "" {
		return fmt.Errorf("settings: cannot read %s (%v) into %T", s.Key, s.Kind, dst)
	}
	v := getenv(s.Env)
	if v == "" {
		return nil
	}
	switch d := dst.(type) {
	case *time.Duration:
		x, err := time.ParseDuration(v)
		if err != nil || (x < 0 && !s.Bounded()) {
			return fmt.Errorf("%s=%q is not a duration such as %v", s.Env, v, example(s))
		}
		*d = x
	case *int:
		x, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%s=%q is not an integer", s.Env, v)
		}
		*d = x
	case *bool:
		switch v {
		case "0":
			*d = false
		case "1":
			*d = true
		default:
			return fmt.Errorf("%s=%q: want 0 or 1", s.Env, v)
		}
	case *string:
		if s.Kind == Choice && !slices.Contains(s.Choices, v) {
			return fmt.Errorf("%s=%q: want %s", s.Env, v, orList(s.Choices))
		}
		*d = v
	}
	return nil
}

// example is a duration to show in s's errors.
func example(s *Setting) string {
	if s.Default != "" {
		if _, err := time.ParseDuration(s.Default); err == nil {
			return s.Default
		}
	}
	return "10ms"
}

// orList writes "a, b or c".
func orList(c []string) string {
	if len(c) < 2 {
		return strings.Join(c, "")
	}
	return strings.Join(c[:len(c)-1], ", ") + " or " + c[len(c)-1]
}
