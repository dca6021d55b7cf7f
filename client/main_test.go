package client_test

import (
	"testing"

	"github.com/ssodir/ssodir/internal/servicetest"
)

func TestMain(m *testing.M) { servicetest.Main(m) }
