echo "something went wrong"
exit 1
