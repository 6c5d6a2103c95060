//go:build tools

// Package tools pins modules that packages of this repository are about to use,
// so that parallel work does not race on go.mod. It is never built.
package tools

import (
	_ "github.com/chromedp/chromedp"
	_ "github.com/gin-gonic/gin"
	_ "github.com/glebarez/sqlite"
	_ "github.com/golang-migrate/migrate/v4"
	_ "github.com/open-feature/go-sdk/openfeature"
	_ "github.com/pressly/goose/v3"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/robfig/cron/v3"
	_ "github.com/sony/gobreaker/v2"
	_ "go.etcd.io/etcd/client/v3"
	_ "go.etcd.io/etcd/client/v3/concurrency"
	_ "go.etcd.io/etcd/server/v3/embed"
	_ "go.uber.org/goleak"
	_ "golang.org/x/crypto/bcrypt"
	_ "golang.org/x/time/rate"
	_ "google.golang.org/grpc"
	_ "gorm.io/driver/postgres"
	_ "gorm.io/gorm"
)
