#!/bin/bash
wc -w < /app/notes.txt > /app/count.txt
