// send.go: a kindling job envelope (docs/envelope.schema.json) built with Go's standard
// library alone and printed as the message body to send (SQS SendMessage, or XADD's job field).
package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// Envelope is version 1: a plain job. Optional fields are omitted when unset.
type Envelope struct {
	Version     int            `json:"version"`
	ID          string         `json:"id"`
	Task        string         `json:"task"`
	Args        []any          `json:"args"`
	Kwargs      map[string]any `json:"kwargs"`
	EnqueuedAt  int64          `json:"enqueued_at"`
	MaxAttempts int            `json:"max_attempts,omitempty"`
	Timeout     float64        `json:"timeout,omitempty"`
}

func newID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b) // letters and digits: within the id's charset, 32 of 128 characters
}

func main() {
	job := Envelope{
		Version:     1,
		ID:          newID(),
		Task:        "tasks.resize",
		Args:        []any{"a.png"},
		Kwargs:      map[string]any{"width": 64},
		EnqueuedAt:  time.Now().UnixMilli(),
		MaxAttempts: 5,
	}
	body, err := json.Marshal(job)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(string(body))
}
