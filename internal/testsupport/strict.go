package testsupport

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// Strict decodes the JSON value data into a T, refusing any field T does
// not have, and fails t if it cannot: data is not what (e.g. "an SQS batch
// response"). It checks that a sample event or a function's answer has the
// shape of the library type that reads it.
func Strict[T any](t testing.TB, data []byte, what string) T {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var v T
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%.300s is not %s: %v", data, what, err)
	}
	return v
}

// StrictFile is Strict over the file at path; it returns the value and the
// file's bytes.
func StrictFile[T any](t testing.TB, path, what string) (T, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return Strict[T](t, b, path+": "+what), b
}
