-- Balance changes per account per day: how many, and the balance after the day's last one.
SELECT dt AS day, key['id'] AS account, count(*) AS changes,
       max_by(numbers['balance'], version) AS balance
FROM changes
WHERE type = 'item' AND participant = 'accounts'
GROUP BY dt, key['id']
ORDER BY day, account
