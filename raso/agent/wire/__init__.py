"""Wire formats the loopback model endpoint speaks (raso.agent.endpoint): each turns an agent program's request
into one chat request for raso's gateway and the gateway's reply back into that program's format."""
