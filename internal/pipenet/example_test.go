package pipenet_test

import (
	"fmt"
	"io"
	"net/http"

	"github.com/sluicegate/sluice/internal/pipenet"
)

// An HTTP server and client joined by pipes instead of a socket.
func Example() {
	l := pipenet.Listen()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello over a pipe")
	})}
	go srv.Serve(l)
	defer srv.Close()

	client := &http.Client{Transport: &http.Transport{DialContext: l.Dial}}
	res, err := client.Get("http://pipe/")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	fmt.Println(res.StatusCode, string(body))
	// Output: 200 hello over a pipe
}
