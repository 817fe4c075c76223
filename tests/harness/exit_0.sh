echo "all good"
