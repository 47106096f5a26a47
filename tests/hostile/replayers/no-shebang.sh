# expect: is not a program the system can run (a script needs a #! line)
echo '{}'
